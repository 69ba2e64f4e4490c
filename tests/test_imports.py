import subprocess
import sys
import textwrap

import memray

CORES = [
    "memray", "memray.models", "memray.errors", "memray.ids", "memray.config",
    "memray.conversation.buffer", "memray.conversation.persist", "memray.conversation.core",
    "memray.conversation.host", "memray.conversation.recall", "memray.store.history",
    "memray.embedding", "memray.index.shard", "memray.index.router", "memray.rpc.local",
    "memray.runtime.deploy", "memray.service", "memray.service.longterm", "memray.service.agent",
    "memray.service.erasure", "memray.facade", "memray.facade.service",
    "memray.metrics", "memray.arguments",
]


def test_cores_import_without_ray():
    code = textwrap.dedent(
        f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "ray" or name.startswith("ray."):
                    raise ImportError("ray is blocked for this test")
        sys.meta_path.insert(0, Block())
        import importlib
        for name in {CORES!r}:
            importlib.import_module(name)
        assert not any(m == "ray" or m.startswith("ray.") for m in sys.modules)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_public_api_is_explicit():
    assert memray.__all__ == sorted(memray.__all__, key=memray.__all__.index)  # no duplicates below
    assert len(set(memray.__all__)) == len(memray.__all__)
    for name in memray.__all__:
        assert hasattr(memray, name), name
