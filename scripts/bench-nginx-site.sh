# The make-bench nginx site (crates/bench/src/nginx.rs): the 600-byte page
# and nginx.conf (one worker, listen 80 reuseport, sendfile and tcp_nopush
# on, access_log off, keep-alive) in directory $1; sourced by the scripts
# that profile the bench's nginx.
bench_nginx_site() {
mkdir -p "$1/www"
python3 -c 'import sys
head = b"<!DOCTYPE html>\n<html><body><p>ustack-bench nginx</p>\n<p>"
tail = b"</p></body></html>\n"
sys.stdout.buffer.write(head + b"x" * (600 - len(head) - len(tail)) + tail)' >"$1/www/index.html"
cat >"$1/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
user root;
pid $1/nginx.pid;
error_log $1/error.log warn;
events {
    worker_connections 4096;
}
http {
    types {
        text/html html;
    }
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 65;
    client_body_temp_path $1/client_body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    server {
        listen 80 reuseport;
        server_name _;
        root $1/www;
    }
}
EOF

}
