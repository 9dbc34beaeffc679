"""The main job: ``seffi run``, ``seffi report``, ``seffi compare``."""
