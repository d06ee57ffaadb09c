"""The host core: probes gather facts about a host (or a captured one) into plain, serialisable data."""
