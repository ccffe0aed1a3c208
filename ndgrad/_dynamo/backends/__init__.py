"""PyTorch's ``torch._dynamo.backends`` package: ``common`` holds ``aot_autograd``."""
