"""DVC stage: every rule of params.yaml at once, before any stage removes its outputs (rlvr.tools.preflight)."""

from rlvr.cli import exit_on_config_error
from rlvr.tools.preflight import check_recipe, write_checked

if __name__ == "__main__":
    with exit_on_config_error():
        check_recipe("params.yaml")
    print(f"[check_params] params.yaml passes every check ({write_checked()})", flush=True)
