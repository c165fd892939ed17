# A stand-in for a Pyroscope server's ingest endpoint: each POST's path
# and multipart fields are kept in a directory, numbered, and answered
# 200.  usage: python3 fake_pyroscope.py DIR PORT_FILE [PORT]
import email.parser
import email.policy
import http.server
import os
import sys

out_dir, port_file = sys.argv[1], sys.argv[2]
port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
count = len([n for n in os.listdir(out_dir) if n.endswith(".path")])


class Ingest(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global count
        body = self.rfile.read(int(self.headers["Content-Length"]))
        head = ("Content-Type: " + self.headers["Content-Type"] + "\r\n\r\n").encode()
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        count += 1
        base = os.path.join(out_dir, "%04d" % count)
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            with open(base + "." + name, "wb") as f:
                f.write(part.get_payload(decode=True))
        with open(base + ".auth", "w") as f:
            f.write(self.headers.get("Authorization", ""))
        with open(base + ".path", "w") as f:  # last: the request is whole
            f.write(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", port), Ingest)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
