/*
 * Intrusive doubly-linked lists: a gr_link inside each object, a gr_link
 * as the head, and gr_container_of() back to the object.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct gr_link {
	struct gr_link *next, *prev;
} gr_link;

static inline void gr_link_init(gr_link *l)
{
	l->next = l->prev = l;
}
static inline bool gr_link_linked(const gr_link *l)
{
	return l->next && l->next != l;
}
static inline void gr_link_add_tail(gr_link *head, gr_link *l)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}
static inline void gr_link_del(gr_link *l)
{
	if (!gr_link_linked(l))
		return;
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->next = l->prev = l;
}
#define gr_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
