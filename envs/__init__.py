"""Gymnasium environments for every seffi task (imported as ``seffi.envs``)."""
