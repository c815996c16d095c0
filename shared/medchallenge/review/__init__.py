"""What an algorithm did, shown to the participant before upload: per case the image with its predictions and the
ground truth drawn over it (worst-scoring cases first), and the convention check, which names a simple coordinate
mistake (axes swapped or flipped, millimetres or world coordinates for voxels, 1-based indices, sizes for corners, a
network's input scale) when the predictions score far better once it is undone.

geometry.py: the cases' image sizes, spacings, origins and directions, read from their headers; conventions.py: the
transforms and the check; figures.py: the PNGs (a thumbnail and the full resolution); preflight.py: both for a
pre-flight's scored jobs.
"""

from .conventions import Finding, check_conventions
from .preflight import CaseFigure, Review, review_jobs, write_figures

__all__ = ["CaseFigure", "Finding", "Review", "check_conventions", "review_jobs", "write_figures"]
