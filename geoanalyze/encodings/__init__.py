"""Position vectors of any encoding, by spec string or callable (see registry.py).

Importing the package registers the built-in families (standard.py, mds.py, files.py); the
registry adds those of the entry point group ``geoanalyze.encodings`` on its first use.
"""

from . import files, mds, standard
from .registry import (
    REGISTRY,
    Encoding,
    EncodingContext,
    EncodingFamily,
    Parameter,
    encoding,
    get_encoding,
    is_encoding_spec,
    list_encodings,
    spec_width,
    takes_model_width,
)

__all__ = [
    "REGISTRY",
    "Encoding",
    "EncodingContext",
    "EncodingFamily",
    "Parameter",
    "encoding",
    "files",
    "get_encoding",
    "is_encoding_spec",
    "list_encodings",
    "mds",
    "spec_width",
    "standard",
    "takes_model_width",
]
