/*
** ljmp: the VM's prototypes on a list of their own.
** New VM file of ljmp's luajit-patch (not part of LuaJIT).
*/

#ifndef _LJ_PROTOLIST_H
#define _LJ_PROTOLIST_H

#include "lj_obj.h"

/*
** A profile that starts in a running VM announces every live prototype.
** Finding them among all GC objects took time in proportion to the heap
** (half a second at 2 M tables), with the program stopped; this list,
** doubly linked through two fields of GCproto, holds exactly the
** prototypes, newest first.  It is weak: the collector neither marks nor
** keeps anything through it, and a prototype leaves it when it is freed.
** A prototype joins it as it is allocated, before any field but its type
** is set, so that every free, even after a failed load, finds it there.
*/
static LJ_AINLINE void lj_protolist_add(global_State *g, GCproto *pt)
{
  GCobj *head = gcref(g->protolist);
  setgcrefnull(pt->ptprev);
  setgcrefp(pt->ptnext, head);
  if (head != NULL) setgcref(gco2pt(head)->ptprev, obj2gco(pt));
  setgcref(g->protolist, obj2gco(pt));
}

static LJ_AINLINE void lj_protolist_remove(global_State *g, GCproto *pt)
{
  GCobj *next = gcref(pt->ptnext), *prev = gcref(pt->ptprev);
  if (next != NULL) setgcrefp(gco2pt(next)->ptprev, prev);
  if (prev != NULL) setgcrefp(gco2pt(prev)->ptnext, next);
  else setgcrefp(g->protolist, next);
}

#endif
