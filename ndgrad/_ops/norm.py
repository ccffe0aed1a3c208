"""Normalization, dropout, embedding and attention ops."""
