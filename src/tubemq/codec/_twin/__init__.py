"""The pure-Python twin of the codec, one module per topic as ``compiled.pyx`` includes one file per
topic; :mod:`tubemq.codec.python` gathers them into the twin's one namespace (the contract)."""
