//! A program's text into its syntax tree: the preprocessor's lines
//! ([`preprocess`]), the tokens ([`lex`]), the tree ([`parse`] into
//! [`ast`]), positional parameters ([`params`]).

pub mod ast;
pub mod lex;
pub(crate) mod params;
pub mod parse;
pub(crate) mod preprocess;
