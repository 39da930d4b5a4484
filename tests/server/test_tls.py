"""TLS on the master and broker RPC ports (standard ``ssl``), certificate made with the openssl CLI."""

from __future__ import annotations

import ssl
from pathlib import Path

from tubemq.protocol import master_pb
from tubemq.server import EmbeddedCluster
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_SERVER

from ._raw import RawClient


def test_tls_round_trip(tmp_path: Path, cert: tuple[str, str]) -> None:
    crt, key = cert
    ctx = ssl.create_default_context(cafile=crt)
    with EmbeddedCluster(data_dir=tmp_path / "d", tls_cert=crt, tls_key=key, **FAST_SERVER) as cl:
        cl.create_topic("secure", partitions=1)
        with RawClient(cl.broker_address, ssl_context=ctx) as c:
            r = c.send("secure", 0, b"over tls")
            assert r.success and r.appendOffset == 0
            assert c.register("g", "secure", 0).success
            m = c.fetch("g", "secure", 0, last_consumed=False)
            assert [x.payLoadData for x in m.messages] == [b"over tls"]
        with RawClient(cl.master_address, ssl_context=ctx) as c:
            req = master_pb.RegisterRequestP2M(clientId="tls-producer", brokerCheckSum=-1, hostName="127.0.0.1")
            resp = c.rpc(1, req, master_pb.RegisterResponseM2P, service_type=1)
            assert resp.success and resp.brokerInfos
        # a plain-text client gets no TubeMQ answer from a TLS port
        with RawClient(cl.broker_address) as plain:
            plain.send_raw(b"\xff\x7f\xf4\xfe" + b"\x00" * 20)
            try:
                assert plain.no_answer(0.5)
            except ConnectionError:
                pass  # the TLS layer closed the connection: also fine
