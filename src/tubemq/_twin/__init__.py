"""The pure-Python twin of the codec, one module per topic as ``_codec.pyx`` includes one file per
topic; :mod:`tubemq._codec_py` gathers them into the twin's one namespace (the contract)."""
