"""What the fidelity runs say of the check (fastlaunch.triton_check): whether JIT calls were checked
against Triton's own choice (FASTLAUNCH_VERIFY=1, or a Triton outside the proven set), how many, and
every disagreement (a kernel handed to Triton because Triton chose another compiled kernel). A run
with a disagreement fails: on a Triton the suite runs, fastlaunch's key must be Triton's."""


def summary(sites):
    """{verify, checked, disagreements} from triton_jit.sites() (a list of (name, counts) or a dict)."""
    from fastlaunch import triton_check

    counts = sites.values() if isinstance(sites, dict) else [c for _, c in sites]
    return {"verify": triton_check.checking(), "checked": sum(c.get("checked", 0) for c in counts),
            "disagreements": triton_check.disagreements()}
