"""How the cores are deployed, above every core: all in this process (:mod:`memray.runtime.deploy`)
or as Ray actors (:mod:`memray.runtime.actors`, the one module that imports ``ray``)."""
