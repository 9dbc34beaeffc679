"""Drop-in coverage callbacks for training loops (imported as ``seffi.callbacks``)."""
