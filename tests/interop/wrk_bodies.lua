-- wrk script: every response's body is checked against the file it must
-- be, and some requests ask for a big file instead of the page.
--
--   wrk ... -s wrk_bodies.lua URL -- PAGE_PATH PAGE_FILE BIG_PATH BIG_FILE EVERY MAX
--
-- Each thread asks for BIG_PATH at its EVERY-th, 2*EVERY-th, ... request,
-- MAX times at most (a 10 MB body is held whole by wrk while it arrives,
-- so MAX bounds the memory), and PAGE_PATH otherwise.  wrk's callback gets
-- no request with the response, so a body is told by its length: one as
-- long as the page must equal the page, one as long as the big file must
-- equal it, any other is bad.  At the end one line:
--
--   bodies page_ok=N big_ok=N big_asked=N bad=N first_bad=STATUS/LENGTH

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

local function slurp(path)
   local f = assert(io.open(path, "rb"))
   local data = f:read("*a")
   f:close()
   return data
end

function init(args)
   page = slurp(args[2])
   big = slurp(args[4])
   page_request = wrk.format(nil, args[1])
   big_request = wrk.format(nil, args[3])
   every = tonumber(args[5])
   max_big = tonumber(args[6])
   n = 0
   page_ok = 0
   big_ok = 0
   big_asked = 0
   bad = 0
   first_bad = "-"
end

function request()
   n = n + 1
   if big_asked < max_big and n % every == 0 then
      big_asked = big_asked + 1
      return big_request
   end
   return page_request
end

function response(status, headers, body)
   if status == 200 and #body == #page and body == page then
      page_ok = page_ok + 1
   elseif status == 200 and #body == #big and body == big then
      big_ok = big_ok + 1
   else
      if bad == 0 then
         first_bad = status .. "/" .. #body
      end
      bad = bad + 1
   end
end

function done(summary, latency, requests)
   local sum = { page_ok = 0, big_ok = 0, big_asked = 0, bad = 0 }
   local first = "-"
   for _, t in ipairs(threads) do
      for k in pairs(sum) do
         sum[k] = sum[k] + t:get(k)
      end
      if first == "-" then
         first = t:get("first_bad")
      end
   end
   io.write(string.format("bodies page_ok=%d big_ok=%d big_asked=%d bad=%d first_bad=%s\n",
                          sum.page_ok, sum.big_ok, sum.big_asked, sum.bad, first))
end
