"""How cores run: in this process (:mod:`memray.runtime.local`) or as Ray actors
(:mod:`memray.runtime.actors`, the one module that imports ``ray``)."""
