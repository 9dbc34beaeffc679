"""seffi.coverage (under construction)."""
