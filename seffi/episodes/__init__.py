"""Finished episodes in one form: `EpisodeBatch`, the info contract and one parser per info format."""

from .batch import EpisodeBatch
from .contract import EpisodeRejected, MatchCoder
from .parsers import parse_generation, parse_info, parse_infos, parse_list, parse_rows, parse_vector

__all__ = ["EpisodeBatch", "EpisodeRejected", "MatchCoder", "parse_generation", "parse_info", "parse_infos"]
__all__ += ["parse_list", "parse_rows", "parse_vector"]
