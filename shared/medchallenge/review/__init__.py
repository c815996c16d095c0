"""What an algorithm did, shown to the participant before upload: per case the image with its predictions and the
ground truth drawn over it (worst-scoring cases first), and the convention check, which names a simple coordinate
mistake (axes swapped or flipped, millimetres for voxels, sizes for corners) when the predictions score far better
once it is undone.

geometry.py: the cases' image sizes and spacings, read from their headers; conventions.py: the transforms and the
check; figures.py: the small PNGs; preflight.py: both for a pre-flight's scored jobs.
"""

from .conventions import Finding, check_conventions
from .preflight import CaseFigure, Review, review_jobs

__all__ = ["CaseFigure", "Finding", "Review", "check_conventions", "review_jobs"]
