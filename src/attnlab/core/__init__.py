"""Shared math and data: seeding, validation, head weights, subspace geometry."""
