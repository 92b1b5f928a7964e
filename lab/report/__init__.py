"""Reports: HTML rendered from a run folder's files alone (no model is loaded)."""
