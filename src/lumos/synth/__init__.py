"""Synthetic and obfuscated workloads: name-free op classes, generative models fitted on
traces, samples written as Chakra ETs, and their fidelity against the source."""
