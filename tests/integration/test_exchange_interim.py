"""1xx interim responses (issue 13, defect 7): never forwarded to an HTTP/1.0 client (RFC 9110
§15.2: a server must not send 1xx to a 1.0 client), and a backend failure after a forwarded 1xx
still ends in a final status, since no final head went out yet."""

from harness import HttpConn, RondelTestCase, ScriptedBackend, main, make_config


def handler(method, target, head, body):
    if target == "/hints":
        return (b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), False
    if target == "/hints-then-close":
        return b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n", True
    return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", False


class Interim(RondelTestCase):
    @classmethod
    def start_backends(cls):
        cls.backend = ScriptedBackend(handler)
        return [cls.backend]

    @classmethod
    def config(cls):
        return make_config([{"address": cls.backend.address}], pool={"retries": 0})

    def test_http10_client_gets_no_1xx(self):
        with HttpConn(self.rondel.port) as c:
            c.request("GET", "/hints", version="HTTP/1.0")
            status, _, body = c.read_response(skip_interim=False)
        self.assertEqual(status, 200)
        self.assertEqual(body, b"ok")

    def test_http11_client_gets_the_1xx(self):
        with HttpConn(self.rondel.port) as c:
            c.request("GET", "/hints")
            self.assertEqual(c.read_response(skip_interim=False)[0], 103)
            status, _, body = c.read_response()
        self.assertEqual((status, body), (200, b"ok"))

    def test_failure_after_a_forwarded_1xx_ends_in_a_final_status(self):
        with HttpConn(self.rondel.port) as c:
            c.request("GET", "/hints-then-close")
            self.assertEqual(c.read_response(skip_interim=False)[0], 103)
            self.assertEqual(c.read_response()[0], 502)

    def test_http10_failure_after_1xx_gets_only_the_final_status(self):
        with HttpConn(self.rondel.port) as c:
            c.request("GET", "/hints-then-close", version="HTTP/1.0")
            self.assertEqual(c.read_response(skip_interim=False)[0], 502)


if __name__ == "__main__":
    main()
