//! The status codes the server sends (RFC 9110 15).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    ContentTooLarge,
    UriTooLong,
    HeaderFieldsTooLarge,
    NotImplemented,
    VersionNotSupported,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::ContentTooLarge => 413,
            Status::UriTooLong => 414,
            Status::HeaderFieldsTooLarge => 431,
            Status::NotImplemented => 501,
            Status::VersionNotSupported => 505,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::ContentTooLarge => "Content Too Large",
            Status::UriTooLong => "URI Too Long",
            Status::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Status::NotImplemented => "Not Implemented",
            Status::VersionNotSupported => "HTTP Version Not Supported",
        }
    }
}
