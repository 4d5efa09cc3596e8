"""Bootstrap server lists, in the forms a deployment may write them."""

from __future__ import annotations


def bootstrap_servers(broker: str) -> str:
    """``host:port`` addresses separated by commas, from ``h:p,h2:p`` (Kafka's own
    form) or ``kafka://h:p;kafka://h2:p`` (Faust's URL form, still read).

    Raises:
        ValueError: When no address is given or one is not ``host:port``.
    """
    parts = [p.strip() for p in broker.replace(";", ",").split(",") if p.strip()]
    addresses = [p.split("://", 1)[-1].rstrip("/") for p in parts]
    bad = [a for a in addresses if not _is_address(a)]
    if bad or not addresses:
        raise ValueError(f"broker: want host:port[,host:port...], got {broker!r}")
    return ",".join(addresses)


def _is_address(address: str) -> bool:
    host, _, port = address.rpartition(":")
    return bool(host) and port.isdigit()
