"""Duration providers behind the simulator's cost-model seam: communication (alpha-beta, an
ASTRA-sim-compatible mode, calibration from traces) and the topologies they run on."""
