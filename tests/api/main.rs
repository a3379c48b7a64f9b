//! The one integration test binary: a real server per test (random port, fresh data
//! directory) driven over HTTP.

mod browse;
mod cli;
mod clients;
mod cognition;
mod console;
mod crash;
mod doctor;
mod embedding;
mod entities;
mod erase;
mod errors;
mod extraction;
mod falkordb;
mod faults;
mod hardening;
mod helpers;
mod identity;
mod lifecycle;
mod mcp;
mod namespaces;
mod neo4j;
mod postgres;
mod proxy;
mod qdrant;
mod redis_working;
mod resources;
mod screening;
mod sessions;
mod tools;
mod transfer;
