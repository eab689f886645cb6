//! Simulated disk with seeded faults. Filled in below.
