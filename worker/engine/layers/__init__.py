"""Building blocks of the forward pass, shared by every model family."""
