"""Position vectors of any encoding, by spec string or callable (see registry.py)."""

from .registry import REGISTRY, Encoding, EncodingContext, get_encoding, is_encoding_spec, list_encodings

__all__ = ["REGISTRY", "Encoding", "EncodingContext", "get_encoding", "is_encoding_spec", "list_encodings"]
