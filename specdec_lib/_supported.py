"""The transformers releases specdec_lib supports, and their check (hand-written plumbing, not a chapter).

A module of its own, importing nothing of specdec_lib: the package's __init__ checks the installed release on
`import specdec_lib`, and hf checks the imported one, so both import it. Kept in __init__ itself, hf would
import the package whose `generate` imports hf (an import cycle; tests/test_imports.py)."""

from __future__ import annotations

SUPPORTED_TRANSFORMERS = ">=4.56,<6"  # pinned 5.23.0 in requirements.txt; all internals go through hf.py


def check_transformers_version(version: str | None) -> None:
    """Refuse an unsupported (or missing) transformers with the fix, instead of an obscure error later
    (e.g. an old transformers on a Colab runtime)."""
    if version is not None:  # (packaging comes with transformers)
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version

        if Version(version) in SpecifierSet(SUPPORTED_TRANSFORMERS):
            return
    found = "no transformers" if version is None else f"transformers {version}"
    raise ImportError(
        f"specdec_lib supports transformers {SUPPORTED_TRANSFORMERS}, but this environment has {found}. "
        f"Install a supported one: pip install 'transformers{SUPPORTED_TRANSFORMERS}' (then restart the kernel)."
    )
