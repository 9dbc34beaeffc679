"""seffi.lanes (under construction)."""
