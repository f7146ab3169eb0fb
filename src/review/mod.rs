//! The review of destinations (design 003's 审核): a persisted queue of links to review, the
//! workers that drain it, and what a verdict does to a link.

pub mod checks;
