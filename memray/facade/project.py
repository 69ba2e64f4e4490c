"""Where :class:`ProjectView` was first written; it lives with the service it scopes
(:mod:`memray.facade.service`)."""

from memray.facade.service import ProjectView

__all__ = ["ProjectView"]
