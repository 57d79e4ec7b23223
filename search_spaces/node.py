"""What a user may say about a whole node rather than one GPU: the NICs' bandwidth together
(`scale_out_bandwidth_per_node`) and the node's price (`price_per_node_hour`,
`spot_price_per_node_hour`), converted to the per-GPU figures the cost model uses.

A node's figure is shared evenly by its GPUs: per-GPU scale-out bandwidth = the node's NIC
bandwidth / GPUs per node (each GPU drives its share of the NICs, as a rail-optimised DGX/HGX
node does with one NIC per GPU, and as a cloud VM's network divides among its GPUs: the
catalog's convention for PCIe instances, search_spaces/catalog/gpus.yaml); per-GPU price =
the node's price / GPUs per node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cost import GPUSpec

from .choices import Choice
from .errors import SpecError

__all__ = ["check_node_fields", "gpu_label", "node_overrides"]


def gpu_label(gpu: Any) -> str:
    """The name a GPU goes by in results and trials: the catalog name or the mapping's name."""
    return gpu if isinstance(gpu, str) else str(gpu.name)


def _choices(value: Any) -> tuple[Any, ...]:
    return value.values() if isinstance(value, Choice) else (value,)


def check_node_fields(section: Any) -> None:
    """Node-wide fields that contradict the rest of a `cluster` section (or of a pool): the
    scale-out bandwidth given both per GPU and per node, a price given both per GPU
    (`price_per_gpu_hour`) and per node, a GPU or node price for several GPU types, an
    on-demand node price with spot servers and no spot node price, two GPUs of one name."""
    if section.scale_out_bandwidth is not None and \
            section.scale_out_bandwidth_per_node is not None:
        raise SpecError("give the scale-out bandwidth once: scale_out_bandwidth (per GPU) or "
                        "scale_out_bandwidth_per_node (a node's NICs together), not both",
                        field="scale_out_bandwidth_per_node")
    names = [gpu_label(g) for g in _choices(section.gpu)]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SpecError(f"two GPUs are named {twice[0]!r}; give each GPU mapping its own "
                        "`name`", field="gpu")
    per_gpu = getattr(section, "price_per_gpu_hour", None) is not None
    for field in ("price_per_node_hour", "spot_price_per_node_hour"):
        if getattr(section, field) is not None and per_gpu:
            raise SpecError(f"give the price once: price_per_gpu_hour (USD per GPU-hour, any "
                            f"pricing) or {field}, not both", field=field)
    for field in ("price_per_gpu_hour", "price_per_node_hour", "spot_price_per_node_hour"):
        if getattr(section, field, None) is not None and len(names) > 1:
            raise SpecError(f"{field} would price the nodes of {len(names)} GPU types the "
                            "same; give each type its price with gpu: {base: NAME, "
                            "price_per_hour: USD per GPU-hour}", field=field)
    spot = "spot" in _choices(section.pricing)
    if spot and section.price_per_node_hour is not None and \
            section.spot_price_per_node_hour is None:
        raise SpecError("price_per_node_hour is the on-demand price; with spot servers give "
                        "spot_price_per_node_hour too", field="spot_price_per_node_hour")


def node_overrides(values: Mapping[str, Any], gpu: GPUSpec, *, where: str = "cluster"
                   ) -> dict[str, Any]:
    """ClusterSpec fields from one fixed cluster's (or pool's, named `where` in messages)
    node-wide values: the per-GPU scale-out bandwidth of `scale_out_bandwidth_per_node`, and
    the per-GPU price of the pricing in force (`price_per_gpu_hour` whatever the pricing, else
    the node's price over its GPUs, else the GPU's own)."""
    per_node = values.get("gpus_per_node") or gpu.gpus_per_node
    out: dict[str, Any] = {}
    if values.get("scale_out_bandwidth_per_node") is not None:
        out["scale_out_bandwidth_bytes_per_s"] = values["scale_out_bandwidth_per_node"] / per_node
    if values.get("price_per_gpu_hour") is not None:
        out["price_usd_per_gpu_hour"] = values["price_per_gpu_hour"]
    elif values.get("pricing") == "spot":
        node = values.get("spot_price_per_node_hour")
        if node is None and gpu.spot_price_usd_per_hour is None:
            raise SpecError(f"GPU {gpu.name} has no spot price; set pricing: on_demand, or "
                            "give the GPU a spot_price_per_hour (or the "
                            f"{'cluster' if where == 'cluster' else 'pool'} a "
                            "spot_price_per_node_hour)", field=f"{where}.pricing")
        out["price_usd_per_gpu_hour"] = node / per_node if node is not None \
            else gpu.spot_price_usd_per_hour
    elif values.get("price_per_node_hour") is not None:
        out["price_usd_per_gpu_hour"] = values["price_per_node_hour"] / per_node
    return out
