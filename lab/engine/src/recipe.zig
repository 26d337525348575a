//! Defaults that deployment recipes patch, the way TensorFold recipes patch the real engine
//! (see patches/ and README.md). Kept in one small file so a recipe patch stays small.

/// Version of the simulator (not a TensorFold version).
pub const sim_version = "0.1.0-sim";

/// Model name served on /v1/models when `serve` gets no --name.
pub const default_served_name = "tensorfold";

/// Names of the recipe patches applied to this tree, printed by --version and logged at start.
pub const applied_patches = "none";
