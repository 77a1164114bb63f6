//! The page's static files, embedded in the binary (and so in the Python
//! wheel): no CDN, nothing to build. `assets/vendor.sh` fetches the
//! vendored uPlot; its output is checked in.

/// One embedded file.
pub(crate) struct Asset {
    /// Its `Content-Type`.
    pub(crate) mime: &'static str,
    /// Its bytes.
    pub(crate) body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The file served at `path`, if any.
pub(crate) fn find(path: &str) -> Option<Asset> {
    let (mime, body): (&str, &[u8]) = match path {
        "/" | "/index.html" => (HTML, include_bytes!("../assets/index.html")),
        "/assets/app.js" => (JS, include_bytes!("../assets/app.js")),
        "/assets/evolve.js" => (JS, include_bytes!("../assets/evolve.js")),
        "/assets/pipeline.js" => (JS, include_bytes!("../assets/pipeline.js")),
        "/assets/service.js" => (JS, include_bytes!("../assets/service.js")),
        "/assets/app.css" => (CSS, include_bytes!("../assets/app.css")),
        "/assets/vendor/uPlot.iife.min.js" => {
            (JS, include_bytes!("../assets/vendor/uPlot.iife.min.js"))
        }
        "/assets/vendor/uPlot.min.css" => (CSS, include_bytes!("../assets/vendor/uPlot.min.css")),
        _ => return None,
    };
    Some(Asset { mime, body })
}
