"""seffi.report (under construction)."""
