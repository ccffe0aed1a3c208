"""Parameter initialisation (nn.init)."""
