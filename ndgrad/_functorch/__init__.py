"""PyTorch's ``torch._functorch`` names for AOT autograd: ``aot_autograd`` and ``partitioners``
(thin aliases of ``ndgrad/compiler/aot.py`` and ``ndgrad/compiler/partitioners.py``)."""
