"""Convolution, pooling and interpolation ops."""
