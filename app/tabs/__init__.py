"""One module per tab; each builds its components (``build``) and wires its events (``wire``)."""
