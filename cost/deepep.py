"""Where DeepEP's dispatch runs: the GPU architectures its kernels are built for.

DeepEP v1.2.1 (the `deep_ep.Buffer` API Megatron Core core_v0.15.0 calls in
megatron/core/transformer/moe/fused_a2a.py; README, "Requirements" and "Roadmap",
https://github.com/deepseek-ai/DeepEP/blob/v1.2.1/README.md): "Ampere (SM80), Hopper (SM90)
GPUs, or other architectures with SM90 PTX ISA support", with "A100 support (intranode
only)": its NVLink kernels from compute capability 8.0, its internode kernels (RDMA through
NVSHMEM, which deduplicate a token's copies to a remote node) from 9.0. DeepEP V2
(2026-04) requires SM90. A GPU whose compute capability is not stated (a GPU of one's own,
a non-NVIDIA one) is not judged.
"""

from __future__ import annotations

__all__ = ["INTERNODE_SM", "INTRANODE_SM", "deepep_refusal", "internode_dedup_runs"]

INTRANODE_SM = 8.0
"""Compute capability DeepEP's intranode (NVLink) kernels need."""
INTERNODE_SM = 9.0
"""Compute capability DeepEP's internode (RDMA) kernels need."""


def internode_dedup_runs(compute_capability: float | None) -> bool:
    """Whether a token can cross to each remote scale-up domain once (DeepEP's internode
    dispatch) on a GPU of this compute capability (None: not stated, not judged)."""
    return compute_capability is None or compute_capability >= INTERNODE_SM


def deepep_refusal(compute_capability: float | None, *, gpu: str, spans: bool) -> str | None:
    """Why DeepEP cannot dispatch an expert-parallel group on this GPU (`spans`: the group
    leaves its scale-up domain), or None where it can."""
    if compute_capability is None or compute_capability >= INTERNODE_SM:
        return None
    if compute_capability < INTRANODE_SM:
        return (f"DeepEP runs on SM80 and newer GPUs; {gpu} is SM{compute_capability * 10:g}")
    if spans:
        return (f"DeepEP runs inside an NVLink domain only on {gpu} "
                f"(SM{compute_capability * 10:g}; its internode kernels need SM90), and this "
                "plan's expert-parallel group spans domains")
    return None
