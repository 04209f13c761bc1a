# Sourced by proxysetup.sh and floorratio.sh: nginx round-robin to 4
# trivial upstreams on 127.0.0.1:18180, and $work/post.lua, the completion
# request wrk sends. Needs $work and $tokens; the caller's EXIT trap stops
# nginx.
body='{"model":"Qwen/Qwen3-8B","prompt":"Hello, how are you today? Tell me about routers.","max_tokens":'"$tokens"',"ignore_eos":true}'
answer='{"id":"cmpl-1","object":"text_completion","created":0,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":" a fixed answer of sixteen tokens from a trivial upstream server","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}'
cat > "$work/nginx.conf" <<NGINX
worker_processes 2;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  upstream trivial { server 127.0.0.1:18181; server 127.0.0.1:18182; server 127.0.0.1:18183; server 127.0.0.1:18184; keepalive 64; }
  server { listen 127.0.0.1:18181; listen 127.0.0.1:18182; listen 127.0.0.1:18183; listen 127.0.0.1:18184;
           location / { default_type application/json; return 200 '$answer'; } }
  server { listen 127.0.0.1:18180;
           location / { proxy_pass http://trivial; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
NGINX
nginx -p "$work" -c nginx.conf

cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
LUA
