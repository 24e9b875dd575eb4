/* HTTP/1.1 request framing for the API: libhttp-parser callbacks with limits on URL, header and
 * body size, and the formatting of answers. No socket I/O here, so tests and fuzzing drive it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api_internal.h"

static void http_fail(struct api_http *h, int status, const char *msg)
{
	if (h->error_status)
		return;
	h->error_status = status;
	snprintf(h->error_msg, sizeof(h->error_msg), "%s", msg);
}

static int http_on_message_begin(http_parser *p)
{
	struct api_http *h = p->data;

	h->started = true;
	return 0;
}

static int http_on_url(http_parser *p, const char *at, size_t len)
{
	struct api_http *h = p->data;

	h->header_bytes += len;
	if (h->url_len + len > API_MAX_URL) {
		http_fail(h, 414, "request URL longer than 1024 bytes");
		return -1;
	}
	memcpy(h->req.path + h->url_len, at, len);
	h->url_len += len;
	h->req.path[h->url_len] = 0;
	return 0;
}

static int http_count_header(struct api_http *h, size_t len)
{
	h->header_bytes += len + 4; /* ": " and CRLF count against the limit too */
	if (h->header_bytes > API_MAX_HEADERS) {
		http_fail(h, 431, "request headers exceed 8192 bytes");
		return -1;
	}
	return 0;
}

static int http_on_header_field(http_parser *p, const char *at, size_t len)
{
	struct api_http *h = p->data;

	/* A field name may arrive in pieces; a value callback in between starts a new one. */
	if (h->field_is_expect || h->field_len == sizeof(h->field)) {
		h->field_len = 0;
		h->field_is_expect = false;
	}
	if (h->field_len + len < sizeof(h->field)) {
		memcpy(h->field + h->field_len, at, len);
		h->field_len += len;
	} else {
		h->field_len = sizeof(h->field); /* too long to be "Expect" */
	}
	return http_count_header(h, len);
}

static int http_on_header_value(http_parser *p, const char *at, size_t len)
{
	struct api_http *h = p->data;

	if (h->field_len == 6 && !strncasecmp(h->field, "expect", 6)) {
		h->field_is_expect = true;
		if (len == 12 && !strncasecmp(at, "100-continue", 12))
			h->expect_continue = true;
	} else {
		h->field_len = sizeof(h->field); /* next field callback starts afresh */
	}
	return http_count_header(h, len);
}

static int http_on_headers_complete(http_parser *p)
{
	struct api_http *h = p->data;
	struct http_parser_url u;

	/* Keep only the path: a query string or an absolute-form URL must not change routing. */
	http_parser_url_init(&u);
	if (http_parser_parse_url(h->req.path, h->url_len, 0, &u) ||
	    !(u.field_set & (1 << UF_PATH))) {
		http_fail(h, 400, "malformed request URL");
		return -1;
	}
	memmove(h->req.path, h->req.path + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
	h->req.path[u.field_data[UF_PATH].len] = 0;
	h->req.method = p->method;

	if ((p->flags & F_CONTENTLENGTH) && p->content_length > API_MAX_BODY) {
		http_fail(h, 413, "request body exceeds 65536 bytes");
		return -1;
	}
	h->headers_done = true;
	return 0;
}

static int http_on_body(http_parser *p, const char *at, size_t len)
{
	struct api_http *h = p->data;
	size_t need = h->req.body_len + len + 1;
	char *nb;

	/* Chunked bodies have no Content-Length: the same limit applies as they arrive. */
	if (h->req.body_len + len > API_MAX_BODY) {
		http_fail(h, 413, "request body exceeds 65536 bytes");
		return -1;
	}
	if (need > h->body_cap) {
		size_t cap = h->body_cap ? h->body_cap : 1024;

		while (cap < need)
			cap *= 2;
		nb = realloc(h->req.body, cap);
		if (!nb) {
			http_fail(h, 500, "out of memory for the request body");
			return -1;
		}
		h->req.body = nb;
		h->body_cap = cap;
	}
	memcpy(h->req.body + h->req.body_len, at, len);
	h->req.body_len += len;
	h->req.body[h->req.body_len] = 0;
	return 0;
}

static int http_on_message_complete(http_parser *p)
{
	struct api_http *h = p->data;

	h->ready = true;
	h->keep_alive = http_should_keep_alive(p);
	/* Pipelined bytes stay unparsed until this request is answered. */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings http_settings = {
    .on_message_begin = http_on_message_begin,
    .on_url = http_on_url,
    .on_header_field = http_on_header_field,
    .on_header_value = http_on_header_value,
    .on_headers_complete = http_on_headers_complete,
    .on_body = http_on_body,
    .on_message_complete = http_on_message_complete,
};

void api_http_init(struct api_http *h)
{
	memset(h, 0, sizeof(*h));
	http_parser_init(&h->parser, HTTP_REQUEST);
	h->parser.data = h;
}

void api_http_free(struct api_http *h)
{
	free(h->req.body);
	h->req.body = NULL;
	h->body_cap = 0;
}

void api_http_next(struct api_http *h)
{
	h->url_len = 0;
	h->header_bytes = 0;
	h->req.path[0] = 0;
	h->req.body_len = 0;
	if (h->req.body)
		h->req.body[0] = 0;
	h->ready = false;
	h->started = false;
	h->field_len = 0;
	h->field_is_expect = false;
	h->headers_done = false;
	h->expect_continue = false;
	h->continue_sent = false;
	http_parser_pause(&h->parser, 0);
}

size_t api_http_parse(struct api_http *h, const char *data, size_t len)
{
	size_t n;
	enum http_errno e;

	if (h->ready || h->error_status)
		return 0;
	n = http_parser_execute(&h->parser, &http_settings, data, len);
	e = HTTP_PARSER_ERRNO(&h->parser);
	if (e == HPE_PAUSED || e == HPE_OK) {
		if (len == 0 && !h->ready && h->started)
			http_fail(h, 400, "connection closed in the middle of a request");
		return n;
	}
	/* Callbacks already chose a status for limit violations; anything else is bad syntax. */
	if (!h->error_status) {
		char msg[API_ERR_LEN];

		snprintf(msg, sizeof(msg), "malformed HTTP request: %s", http_errno_description(e));
		/* RFC 9110: a method the server does not recognise is 501, other syntax is 400. */
		http_fail(h, e == HPE_INVALID_METHOD ? 501 : 400, msg);
	}
	return n;
}

static const char *http_reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 204:
		return "No Content";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 413:
		return "Payload Too Large";
	case 414:
		return "URI Too Long";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 503:
		return "Service Unavailable";
	default:
		return status < 500 ? "Client Error" : "Internal Server Error";
	}
}

char *api_http_format(const struct api_response *r, bool keep_alive, size_t *len)
{
	size_t blen = r->body ? strlen(r->body) : 0;
	size_t cap = 256 + blen + (r->allow ? strlen(r->allow) : 0);
	char *out = malloc(cap);
	int n;

	if (!out)
		return NULL;
	n = snprintf(out, cap,
		     "HTTP/1.1 %d %s\r\nServer: lvmm/" API_VERSION "\r\n%s%s%s"
		     "Connection: %s\r\n",
		     r->status, http_reason(r->status), r->allow ? "Allow: " : "",
		     r->allow ? r->allow : "", r->allow ? "\r\n" : "",
		     keep_alive ? "keep-alive" : "close");
	if (r->status != 204)
		n += snprintf(out + n, cap - n,
			      "Content-Type: application/json\r\n"
			      "Content-Length: %zu\r\n",
			      blen);
	n += snprintf(out + n, cap - n, "\r\n");
	if (r->status != 204 && blen) {
		memcpy(out + n, r->body, blen);
		n += blen;
	}
	*len = n;
	return out;
}

void api_response_free(struct api_response *r)
{
	free(r->body);
	r->body = NULL;
}

void api_response_error(struct api_response *r, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *o;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Messages may quote client bytes (a URL, a field name): keep the JSON valid UTF-8. */
	for (char *c = msg; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			*c = '?';
	free(r->body);
	r->status = status;
	/* cloud-hypervisor's error body: the chain of messages, outermost first */
	o = json_pack("[s]", msg);
	r->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
}
